package event

// The members of the objects a body holds, numbered, so that both readers of a body (readBody
// and the tree's decoder) know the same keys: a key not listed here is not a member of its
// object. readBody also records by number which members an object gave (see first).

// The members of an event object.
const (
	mType = iota
	mProviderCallID
	mOccurredAt
	mCall
	mProvider
	mSequence
	mProviderEventID
	mObserver
	mLocations
	mRaw
	mAnsweredBy
	mDisposition
	mDuration
	mTalkTime
	mAnsweredElsewhere
	mSIPCode
	mSIPReason
	mReleased
	mTo
	mMode
	mURL
	mMIMEType
	mBytes
	mText
	mLanguage
	mConfidence
)

// eventMember returns the number of an event's member key, or -1 for a key an event does not
// have.
func eventMember(key string) int {
	switch key {
	case "type":
		return mType
	case "providerCallId":
		return mProviderCallID
	case "occurredAt":
		return mOccurredAt
	case "call":
		return mCall
	case "provider":
		return mProvider
	case "sequence":
		return mSequence
	case "providerEventId":
		return mProviderEventID
	case "observer":
		return mObserver
	case "locations":
		return mLocations
	case "raw":
		return mRaw
	case "answeredBy":
		return mAnsweredBy
	case "disposition":
		return mDisposition
	case "duration":
		return mDuration
	case "talkTime":
		return mTalkTime
	case "answeredElsewhere":
		return mAnsweredElsewhere
	case "sipCode":
		return mSIPCode
	case "sipReason":
		return mSIPReason
	case "released":
		return mReleased
	case "to":
		return mTo
	case "mode":
		return mMode
	case "url":
		return mURL
	case "mimeType":
		return mMIMEType
	case "bytes":
		return mBytes
	case "text":
		return mText
	case "language":
		return mLanguage
	case "confidence":
		return mConfidence
	}
	return -1
}

// The members of a call block.
const (
	mDirection = iota
	mFrom
	mCallTo
	mTrunk
	mDiversion
)

// callMember returns the number of a call block's member key, or -1.
func callMember(key string) int {
	switch key {
	case "direction":
		return mDirection
	case "from":
		return mFrom
	case "to":
		return mCallTo
	case "trunk":
		return mTrunk
	case "diversion":
		return mDiversion
	}
	return -1
}

// The members of a party, then the two a diversion hop adds to them.
const (
	mKind = iota
	mNumber
	mName
	mExtension
	mURI
	mReason
	mCounter
)

// partyMember returns the number of a party's member key, or -1.
func partyMember(key string) int {
	switch key {
	case "kind":
		return mKind
	case "number":
		return mNumber
	case "name":
		return mName
	case "extension":
		return mExtension
	case "uri":
		return mURI
	}
	return -1
}

// hopMember returns the number of a diversion hop's member key, or -1.
func hopMember(key string) int {
	switch key {
	case "reason":
		return mReason
	case "counter":
		return mCounter
	}
	return partyMember(key)
}
